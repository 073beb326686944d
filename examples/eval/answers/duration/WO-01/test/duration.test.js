import test from 'node:test';
import assert from 'node:assert/strict';
import { parseDuration } from '../duration.js';

test('parses each unit and their combinations', () => {
  assert.equal(parseDuration('1h30m'), 5400);
  assert.equal(parseDuration('45s'), 45);
  assert.equal(parseDuration('2h0m5s'), 7205);
});

test('rejects what is not a duration', () => {
  for (const text of ['', '1h 30m', '30m1h', '1h1h', '5', '1.5h', '2d']) {
    assert.throws(() => parseDuration(text), RangeError, text);
  }
});
