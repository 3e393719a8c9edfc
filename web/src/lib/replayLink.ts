/** Which replay a link to one (`?replay={id}` on the viewer page) opens: the one in the list of public
 *  replays the page already has, else the one `GET /api/replays/{id}` answers (a replay past the list's first
 *  page, or one this viewer may watch without it being listed), else none (unknown, or not this viewer's). */
export async function replayFromLink<R extends { id: string }>(
  search: string,
  list: R[],
  fetchOne: (id: string) => Promise<R>,
): Promise<R | undefined> {
  const wanted = new URLSearchParams(search).get('replay');
  if (!wanted) return undefined;
  const listed = list.find((r) => r.id === wanted);
  if (listed) return listed;
  try {
    return await fetchOne(wanted);
  } catch {
    return undefined;
  }
}
