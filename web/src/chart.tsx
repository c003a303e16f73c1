import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { formatNumber } from './format';

export interface DayFigure {
  day: string;
  tokens: number;
}

const compact = new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 1 });

/**
 * Tokens per day of a month (bars, left axis) and the month so far against its budget (lines,
 * right axis), days in UTC. Drawn by uPlot on a canvas; the figures are also in a table beside it
 * (the page's), which is what a screen reader reads.
 */
export function UsageChart(props: { days: DayFigure[]; budget: number | null; label: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = box.current!;
    const x = props.days.map((d) => Date.parse(`${d.day}T00:00:00Z`) / 1000);
    const daily = props.days.map((d) => d.tokens);
    let sum = 0;
    const cumulative = daily.map((tokens) => (sum += tokens));
    const series: uPlot.Series[] = [
      {},
      {
        label: 'Tokens that day',
        scale: 'day',
        stroke: '#1d4ed8',
        fill: 'rgba(29, 78, 216, 0.35)',
        width: 1,
        paths: uPlot.paths.bars!({ size: [0.7, 48] }),
        points: { show: false },
        value: (_u, v) => (v === null ? '—' : formatNumber(v)),
      },
      {
        label: 'Month so far',
        scale: 'month',
        stroke: '#047857',
        width: 2,
        points: { show: false },
        value: (_u, v) => (v === null ? '—' : formatNumber(v)),
      },
    ];
    const data: uPlot.AlignedData = [x, daily, cumulative];
    if (props.budget !== null) {
      series.push({
        label: 'Monthly budget',
        scale: 'month',
        stroke: '#b91c1c',
        width: 2,
        dash: [8, 5],
        points: { show: false },
        value: (_u, v) => (v === null ? '—' : formatNumber(v)),
      });
      data.push(x.map(() => props.budget));
    }
    const monthMax = Math.max(sum, props.budget ?? 0, 1);
    const options: uPlot.Options = {
      width: Math.max(element.clientWidth, 280),
      height: 300,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      series,
      scales: {
        x: { time: true },
        day: { range: (_u, _min, max) => [0, Math.max(max, 1) * 1.1] },
        month: { range: () => [0, monthMax * 1.05] },
      },
      axes: [
        { stroke: '#374151', grid: { stroke: '#e5e7eb' } },
        {
          scale: 'day',
          stroke: '#374151',
          grid: { stroke: '#e5e7eb' },
          size: 56,
          values: (_u, ticks) => ticks.map((t) => compact.format(t)),
        },
        {
          scale: 'month',
          side: 1,
          stroke: '#374151',
          grid: { show: false },
          size: 56,
          values: (_u, ticks) => ticks.map((t) => compact.format(t)),
        },
      ],
      legend: { live: true },
      hooks: {
        draw: [
          () => {
            // Read by bench/scenarios/console.ts: the figures are on screen.
            performance.mark('console:usage-chart-drawn');
            element.dataset.drawn = 'true';
          },
        ],
      },
    };
    const plot = new uPlot(options, data, element);
    const resize = new ResizeObserver(() => {
      const width = Math.max(element.clientWidth, 280);
      if (width !== plot.width) plot.setSize({ width, height: 300 });
    });
    resize.observe(element);
    return () => {
      resize.disconnect();
      plot.destroy();
      delete element.dataset.drawn;
    };
  }, [props.days, props.budget]);
  return <div class="chart" ref={box} role="img" aria-label={props.label} />;
}
