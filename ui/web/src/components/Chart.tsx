// ECharts, loaded lazily (React.lazy) so it is not in the initial bundle.
import { BarChart } from 'echarts/charts';
import { GridComponent, LegendComponent, TooltipComponent } from 'echarts/components';
import { init, use, type EChartsCoreOption } from 'echarts/core';
import { CanvasRenderer } from 'echarts/renderers';
import { useEffect, useRef } from 'react';

use([BarChart, GridComponent, LegendComponent, TooltipComponent, CanvasRenderer]);

export default function Chart({ option, height = 280, dark, label }: { option: EChartsCoreOption; height?: number; dark?: boolean; label: string }) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!ref.current) return;
    const chart = init(ref.current, dark ? 'dark' : undefined, { renderer: 'canvas' });
    chart.setOption({ backgroundColor: 'transparent', ...option });
    const ro = new ResizeObserver(() => chart.resize());
    ro.observe(ref.current);
    return () => {
      ro.disconnect();
      chart.dispose();
    };
  }, [option, dark]);
  return <div ref={ref} role="img" aria-label={label} style={{ width: '100%', height }} />;
}
