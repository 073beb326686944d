package gitws

import (
	"maps"
	"slices"
	"sync"
)

// A modeWatch records, from a Snapshot on, which work-tree paths may have
// changed in a way that alters permission bits: their attributes changed
// (chmod, or a write that cleared a set-id bit), or they were created,
// deleted or moved. restoreModes then checks those paths only instead of
// an lstat of every file in the tree, which on a large tree was most of the
// cost of a rollback. Whenever the record may be incomplete (the kernel
// dropped events, a directory was moved, too many directories to watch, no
// inotify) it is not ok, and restoreModes walks the whole tree as before.
// The same record of created names is where treeChanges finds untracked
// files.
//
// The set of paths is cumulative since the snapshot, so a second Rollback
// (or a Tidy after a commit) checks everything the first one did.
type modeWatch struct {
	mu     sync.Mutex
	impl   watchImpl
	broken bool
	// changed holds the slash paths, relative to the root, that may have
	// changed; true for one created, deleted or moved, which if a directory
	// needs a walk of everything inside.
	changed map[string]bool
}

// maxWatchedDirs bounds the directories one snapshot watches (each watch
// pins kernel memory); a larger tree gets the full walk.
const maxWatchedDirs = 8192

// maxLiveWatches bounds the watches open at once in this process (inotify
// instances are limited per user): the oldest is closed and its baselines
// fall back to the full walk.
const maxLiveWatches = 4

var live struct {
	sync.Mutex
	watches []*modeWatch
}

// newModeWatch starts a watch, or returns nil where none can be had.
func newModeWatch(root string) *modeWatch {
	impl, ok := startWatch(root)
	if !ok {
		return nil
	}
	w := &modeWatch{impl: impl, changed: map[string]bool{}}
	live.Lock()
	defer live.Unlock()
	if len(live.watches) >= maxLiveWatches {
		live.watches[0].close()
		live.watches = slices.Delete(live.watches, 0, 1)
	}
	live.watches = append(live.watches, w)
	return w
}

// addDir watches the directory rel (slash path, "." for the root), before
// the snapshot reads it. A nil watch does nothing.
func (w *modeWatch) addDir(rel string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken {
		return
	}
	if !w.impl.add(rel) {
		w.breakLocked()
	}
}

// paths returns the paths that may have changed since the snapshot (see
// changed), and false when that record may be incomplete (or there is no
// watch).
func (w *modeWatch) paths() (map[string]bool, bool) {
	if w == nil {
		return nil, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken {
		return nil, false
	}
	if !w.impl.drain(w.changed) {
		w.breakLocked()
		return nil, false
	}
	return maps.Clone(w.changed), true
}

// invalidate makes every later paths call report an incomplete record: for
// a restore that failed half-way.
func (w *modeWatch) invalidate() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.breakLocked()
}

func (w *modeWatch) close() { w.invalidate() }

func (w *modeWatch) breakLocked() {
	if !w.broken {
		w.broken = true
		w.impl.close()
		w.changed = nil
	}
}
