// A peer's base URL, checked once where options are resolved: the services speak plain HTTP on a
// private network, so anything but an absolute http:// URL is a configuration mistake.

/**
 * Parses `value` as the base URL of a leasehold service. `name` is the option it came from, and
 * leads the error message.
 */
export function httpUrl(name: string, value: string | undefined): URL {
  let url: URL;
  try {
    url = new URL(value ?? '');
  } catch {
    throw new RangeError(
      `${name} must be an absolute http:// URL such as http://127.0.0.1:4100, not ${JSON.stringify(value)}.`,
    );
  }
  if (url.protocol !== 'http:') {
    throw new RangeError(
      `${name} must be an http:// URL (the services speak plain HTTP on a private network), not ${JSON.stringify(value)}.`,
    );
  }
  return url;
}

/**
 * A peer's URL for a log line: the password of its `user:pass@` masked (`***`), as the database
 * URL is. Node sends a URL's credentials as Basic authentication, so they are a secret.
 */
export function redactUrl(url: string | URL): string {
  const copy = new URL(url.toString());
  if (!copy.password) return url.toString();
  copy.password = '***';
  return copy.toString();
}
