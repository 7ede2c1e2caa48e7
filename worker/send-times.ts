// How long this worker's sends have been taking: the longest of the most recent ones, the
// "expected send time" by which a lease keeper judges whether a lease is too short to send on.
/** Enough recent sends that one fast answer does not hide a slow gateway. */
const KEPT = 16;

export class SendTimes {
  private readonly recent: number[] = [];

  /** The longest of the recent sends, in ms; 0 before the first one. */
  get expectedMs(): number {
    return this.recent.length === 0 ? 0 : Math.max(...this.recent);
  }

  record(ms: number): void {
    this.recent.push(Math.max(0, ms));
    if (this.recent.length > KEPT) this.recent.shift();
  }
}
