/*
 * A local snapshot's uses and its deferred deletion, shared by the local
 * provider and hangar-jail (the snapshot's layout: snapshot.h).
 *
 * Every sandbox made from a snapshot holds the snapshot's `use` file
 * flock()ed shared for as long as its jail lives, and the kernel lets go of
 * it however the jail ends; a deletion takes it exclusively, so it never
 * removes a snapshot in use, and a create that finds it held exclusively
 * fails as if the snapshot were gone.
 *
 * A snapshot can also be released: marked (a file `release` in its
 * directory) to be deleted once no sandbox uses it. Nobody is told when the
 * last use goes (a jail killed with SIGKILL says nothing), so whoever drops
 * a use or finds one dropped reaps it: the jail at its end, the library
 * after a kill or when it clears a dead jail away, the release itself.
 * Reaping is done under the snapshot's gate, its directory flock()ed
 * exclusively: the mark is looked for, and when the use lock is free the
 * directory is renamed to .del-<id> (from then on no create finds it) and
 * removed. The gate orders the marking and every look, and a jail lets go
 * of its use before it looks, so the last use dropped always sees the mark,
 * whichever of the two comes first.
 *
 * A .del-<id> directory whose gate is free was left half-removed (its
 * remover died, or was an unprivileged jail that cannot remove files owned
 * in its caller's image range) and is anyone's to finish.
 */
#pragma once

#define LSNAP_RELEASE "release" /* the mark, in the snapshot's directory */
#define LSNAP_DEL_PREFIX ".del-"

/*
 * Removes a snapshot's directory once it is out of the way (lstate_rmtree_at,
 * or a helper that may remove an unprivileged caller's files). 0 or -errno.
 */
typedef int (*lsnap_rm_fn)(const char *path);

#define LSNAP_MARK 1   /* release it first */
#define LSNAP_NOWAIT 2 /* a sweep, not a use dropped: leave it when its gate is held */

/*
 * Reaps snapshot dir (its path), flags LSNAP_*. When it is marked and
 * unused, renames it to .del-<id> beside it and removes that with rm
 * (NULL: leaves it for lsnap_reap_leftover). 1 when it went, 0 when it
 * stays (not released, in use, or with LSNAP_NOWAIT someone else on it),
 * or -errno (ENOENT: no such snapshot; with rm's failure the directory is
 * out of the way already).
 */
int lsnap_reap(const char *dir, int flags, lsnap_rm_fn rm);

/*
 * Finishes the removal of a renamed snapshot directory (a .del-<id>) whose
 * gate is free. 1 when it went, 0 when its remover still works on it or it
 * is gone, or -errno.
 */
int lsnap_reap_leftover(const char *deldir, lsnap_rm_fn rm);

/*
 * The gate of snapshot dir, held (blocking) on the returned descriptor until
 * it is closed; -1 with errno (ENOENT: no such snapshot). The explicit
 * deletion takes it too, so that a half-removed directory is never
 * finished twice at once.
 */
int lsnap_gate(const char *dir);
