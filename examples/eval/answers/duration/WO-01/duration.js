/** Parses durations such as "1h30m". */

const units = { h: 3600, m: 60, s: 1 };
const pattern = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/;

/**
 * Returns the number of seconds text stands for: whole numbers of hours,
 * minutes and seconds, in that order, each unit at most once.
 * @param {string} text
 * @returns {number}
 * @throws {RangeError} when text is not such a duration
 */
export function parseDuration(text) {
  const match = pattern.exec(text);
  if (text === '' || match === null) {
    throw new RangeError(`not a duration: ${JSON.stringify(text)} (want e.g. "1h30m", "45s")`);
  }
  const [, h, m, s] = match;
  return Object.entries({ h, m, s })
    .filter(([, n]) => n !== undefined)
    .reduce((total, [unit, n]) => total + Number(n) * units[unit], 0);
}
