// nock between the gateway and its downstreams, for the tests of faults there: nothing leaves
// the machine, loopback stays reachable (only a scope on a downstream's origin intercepts
// anything), and every scope is gone after each test.
import nock from 'nock';
import { afterAll, afterEach, beforeAll } from 'vitest';

export function interceptDownstreams(): void {
  beforeAll(() => {
    nock.disableNetConnect();
    nock.enableNetConnect('127.0.0.1');
  });
  afterEach(() => {
    nock.abortPendingRequests();
    nock.cleanAll();
  });
  afterAll(() => {
    nock.enableNetConnect();
    nock.restore();
  });
}
