import test from 'node:test';
import assert from 'node:assert/strict';
import { parseDuration } from '../duration.js';

test('valid durations', () => {
  for (const [text, seconds] of [['1h30m', 5400], ['45s', 45], ['2h0m5s', 7205], ['90m', 5400],
    ['0s', 0], ['1h1s', 3601], ['100h', 360000]]) {
    assert.equal(parseDuration(text), seconds, text);
  }
});

test('invalid durations throw a RangeError naming the text', () => {
  for (const text of ['', ' ', '1h 30m', '30m1h', '1h1h', '5', 'h', '-1s', '1.5h', '2d', '1H']) {
    assert.throws(() => parseDuration(text), (err) => err instanceof RangeError && err.message.includes(JSON.stringify(text)), text);
  }
});
