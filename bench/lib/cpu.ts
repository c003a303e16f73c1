import { readFileSync } from 'node:fs';

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  // utime and stime are fields 14 and 15 of stat(5); here shifted by the two before ") ".
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
