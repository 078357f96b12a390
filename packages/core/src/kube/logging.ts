// JSON log lines, one object per line on stderr, with a least level.

export type Logger = (
  level: 'info' | 'warn' | 'error',
  msg: string,
  fields?: Record<string, unknown>,
) => void;

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** JSON log lines on stderr; lines less severe than `least` are dropped (debug logs everything). */
export const jsonLogger =
  (
    component: string,
    out: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
    least: LogLevel = 'info',
  ): Logger =>
  (level, msg, fields) => {
    if (LOG_LEVELS.indexOf(level) < LOG_LEVELS.indexOf(least)) return;
    out(JSON.stringify({ ts: new Date().toISOString(), level, component, msg, ...fields }));
  };
