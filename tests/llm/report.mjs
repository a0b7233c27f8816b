// What the LLM test drivers (clients.mjs, real.mjs) share: their one line of JSON on stdout, and
// when each streamed part arrived, on stderr, to show that a stream was not buffered.

export function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// Records when each streamed part arrived.
export function arrivalClock() {
  const start = performance.now();
  const times = [];
  return {
    tick: () => times.push(performance.now() - start),
    report(label) {
      if (times.length === 0) return;
      const gaps = times.slice(1).map((t, i) => t - times[i]);
      const ms = (x) => x.toFixed(1);
      process.stderr.write(
        `${label}: ${times.length} parts, first at ${ms(times[0])} ms, last at ${ms(times.at(-1))} ms` +
          (gaps.length ? `, gaps min ${ms(Math.min(...gaps))} / max ${ms(Math.max(...gaps))} ms` : '') +
          '\n',
      );
    },
  };
}
