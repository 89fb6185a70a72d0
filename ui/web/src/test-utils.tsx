import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { App as AntApp } from 'antd';
import type { ReactNode } from 'react';
import { MemoryRouter, Route, Routes, useLocation } from 'react-router';
import './i18n';

export function withQuery(ui: ReactNode) {
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  return <QueryClientProvider client={qc}>{ui}</QueryClientProvider>;
}

/** The current location, for tests of navigation (data-testid="location"). */
export function LocationProbe() {
  const l = useLocation();
  return <div data-testid="location">{l.pathname + l.search}</div>;
}

/**
 * withPage renders a page as the app does (query client, antd App, router at
 * url, the page at path), with a LocationProbe beside it. useAuth must be
 * mocked by the test (vi.mock('../auth')).
 */
export function withPage(ui: ReactNode, url = '/', path = '*') {
  return withQuery(
    <AntApp>
      <MemoryRouter initialEntries={[url]}>
        <Routes>
          <Route path={path} element={<>{ui}<LocationProbe /></>} />
          <Route path="*" element={<LocationProbe />} />
        </Routes>
      </MemoryRouter>
    </AntApp>,
  );
}
