/**
 * One writer per spool folder. Several processes may be given the same `spoolDir` (every window
 * of an editor runs its own extension host with the same `globalStorageUri`), so the folder holds
 * numbered slots, each owned by one live process through an `owner` file with its pid. A slot
 * whose owner died (SIGKILL, crash) is taken over, and its events are delivered by the new owner.
 */
import { mkdir, open, readFile, readdir, rename, unlink } from "node:fs/promises";
import { join } from "node:path";

export const MAX_SLOTS = 16;
const OWNER = "owner";

export interface SlotLock {
  readonly dir: string;
  release(): Promise<void>;
}

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";  // exists, someone else's
  }
}

async function tryCreate(path: string): Promise<boolean> {
  try {
    const handle = await open(path, "wx");
    await handle.writeFile(String(process.pid));
    await handle.close();
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
}

/** Lock slot `dir` for this process, or resolve to null when a live process holds it. */
export async function lockSlot(dir: string): Promise<SlotLock | null> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, OWNER);
  if (!(await tryCreate(path))) {
    const holder = Number((await readFile(path, "utf8").catch(() => "")).trim());
    if (alive(holder)) return null;
    // A dead owner's lock: move it aside (only one contender's rename succeeds), then take it.
    const aside = `${path}.stale-${process.pid}-${Math.random().toString(36).slice(2)}`;
    try {
      await rename(path, aside);
      await unlink(aside);
    } catch {
      return null;
    }
    if (!(await tryCreate(path))) return null;
  }
  return {
    dir,
    release: async () => {
      const holder = await readFile(path, "utf8").catch(() => "");
      if (holder.trim() === String(process.pid)) await unlink(path).catch(() => undefined);
    },
  };
}

export function slotDir(root: string, index: number): string {
  return join(root, `slot-${index}`);
}

/** The slot folders that exist under `root`. */
export async function existingSlots(root: string): Promise<string[]> {
  const names = await readdir(root).catch(() => [] as string[]);
  return names.filter((name) => /^slot-[0-9]+$/.test(name)).map((name) => join(root, name));
}
