export interface SseEvent {
  event: string;
  data: unknown;
}

/** The events of a text/event-stream body, comments left out. */
export function parseEvents(text: string): SseEvent[] {
  return text
    .split('\n\n')
    .filter((block) => /^event: /m.test(block))
    .map((block) => {
      const event = /^event: (.+)$/m.exec(block)?.[1] ?? '';
      const data = /^data: (.+)$/m.exec(block)?.[1] ?? 'null';
      return { event, data: JSON.parse(data) as unknown };
    });
}
