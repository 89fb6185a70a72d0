import { useQueryClient } from '@tanstack/react-query';
import { createContext, useCallback, useContext, useEffect, useMemo, useRef, useState, type ReactNode } from 'react';
import * as authApi from './services/auth';
import { prefetchDashboard } from './services/dashboard';
import { setUnauthorizedHandler } from './services/http';

/** Why there is no session any more: the user logged out, or the server refused the session (401). */
export type SessionEnd = 'logout' | 'expired' | null;

interface AuthState {
  me: authApi.Me | null;
  ready: boolean;
  /** How the last session ended (null: there was none in this page, or one is open). */
  ended: SessionEnd;
  login: (u: string, p: string) => Promise<authApi.Me>;
  logout: () => Promise<void>;
  /** refresh reads the user again (after a change to their own role, say). */
  refresh: () => Promise<void>;
}

const Ctx = createContext<AuthState | null>(null);

export function AuthProvider({ children }: { children: ReactNode }) {
  const qc = useQueryClient();
  const [me, setMe] = useState<authApi.Me | null>(null);
  const [ready, setReady] = useState(false);
  const [ended, setEnded] = useState<SessionEnd>(null);
  const hadSession = useRef(false);
  hadSession.current = me !== null;

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
      // A 401 inside a session: it expired (or was revoked); the login page says so.
      if (hadSession.current) setEnded('expired');
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
    setEnded(null);
    setMe(m);
    return m;
  }, [qc]);
  const logout = useCallback(async () => {
    await authApi.logout();
    qc.clear();
    setEnded('logout');
    setMe(null);
  }, [qc]);
  const refresh = useCallback(async () => {
    const m = await authApi.me();
    if (!m && hadSession.current) setEnded('expired');
    setMe(m);
  }, []);

  const value = useMemo(() => ({ me, ready, ended, login, logout, refresh }), [me, ready, ended, login, logout, refresh]);
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}

export function useAuth(): AuthState {
  const v = useContext(Ctx);
  if (!v) throw new Error('useAuth outside AuthProvider');
  return v;
}
