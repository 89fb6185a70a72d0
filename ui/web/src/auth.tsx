import { useQueryClient } from '@tanstack/react-query';
import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from 'react';
import * as authApi from './services/auth';
import { prefetchDashboard } from './services/dashboard';
import { setUnauthorizedHandler } from './services/http';

interface AuthState {
  me: authApi.Me | null;
  ready: boolean;
  login: (u: string, p: string) => Promise<authApi.Me>;
  logout: () => Promise<void>;
}

const Ctx = createContext<AuthState | null>(null);

export function AuthProvider({ children }: { children: ReactNode }) {
  const qc = useQueryClient();
  const [me, setMe] = useState<authApi.Me | null>(null);
  const [ready, setReady] = useState(false);

  useEffect(() => {
    let live = true;
    authApi
      .me()
      .then((m) => {
        // On a load of the dashboard, its requests start now, alongside its first render.
        if (m && window.location.pathname === '/') prefetchDashboard(qc, m);
        if (live) setMe(m);
      })
      .catch(() => live && setMe(null))
      .finally(() => live && setReady(true));
    setUnauthorizedHandler(() => {
      setMe(null);
      qc.clear();
    });
    return () => {
      live = false;
      setUnauthorizedHandler(null);
    };
  }, [qc]);

  const login = useCallback(async (u: string, p: string) => {
    const m = await authApi.login(u, p);
    qc.clear();
    setMe(m);
    return m;
  }, [qc]);
  const logout = useCallback(async () => {
    await authApi.logout();
    qc.clear();
    setMe(null);
  }, [qc]);

  const value = useMemo(() => ({ me, ready, login, logout }), [me, ready, login, logout]);
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}

export function useAuth(): AuthState {
  const v = useContext(Ctx);
  if (!v) throw new Error('useAuth outside AuthProvider');
  return v;
}
