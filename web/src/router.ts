import { useEffect, useState } from 'preact/hooks';

/** The console's routes are paths under /console, handled here (the service answers every one with the page). */
export const BASE = '/console';

type Listener = () => void;
const listeners = new Set<Listener>();
const notify = () => listeners.forEach((listener) => listener());
addEventListener('popstate', notify);

/** The route: the path under /console ('/usage'), and the query. */
export function currentRoute(): { path: string; query: URLSearchParams } {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : '/';
  return { path: path.replace(/\/+$/, '') || '/', query: new URLSearchParams(location.search) };
}

export function navigate(to: string, options: { replace?: boolean } = {}): void {
  // Read by bench/scenarios/console.ts: the time from here to the page's figures on screen.
  performance.clearMarks('console:navigate');
  performance.mark('console:navigate');
  const url = `${BASE}${to === '/' ? '' : to}`;
  if (options.replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  notify();
  scrollTo(0, 0);
}

/** The route, kept current. */
export function useRoute() {
  const [route, setRoute] = useState(currentRoute);
  useEffect(() => {
    const listener = () => setRoute(currentRoute());
    listeners.add(listener);
    return () => void listeners.delete(listener);
  }, []);
  return route;
}
