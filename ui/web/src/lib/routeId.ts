import { ApiError } from '../services/http';

/** routeId is the numeric id of a route like /jobs/:id, or null for "/jobs/abc" (no request is made for it). */
export function routeId(id: string | undefined): number | null {
  if (!id || !/^[1-9]\d{0,15}$/.test(id)) return null;
  const n = Number(id);
  return Number.isSafeInteger(n) ? n : null;
}

/** The error a page shows for an id that cannot exist: the same "not found" as the API's 404. */
export const notFound = new ApiError(404, 'not found');
