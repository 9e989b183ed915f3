package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// The store lock tells restore whether a SQLite store is in use. Every
// command that opens a SQLite store (serve above all) holds a shared
// flock(2) on FILE.lock beside the database file for as long as the store
// is open; restore takes it exclusively, without waiting, and so refuses
// while any process has the store open. The kernel drops a flock when its
// process ends, however it ends: a crashed serve never leaves a stale lock.

// errStoreInUse: restore found the store's lock held.
var errStoreInUse = errors.New("in use")

// storeLock is a held flock on a store's lock file.
type storeLock struct{ f *os.File }

func (l *storeLock) Close() error { return l.f.Close() } // closing drops the flock

// lockStore takes the lock of the SQLite store in file: shared (every
// process that opens the store) or exclusive (restore). It never waits: a
// conflicting holder is errStoreInUse.
func lockStore(file string, exclusive bool) (*storeLock, error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return nil, fmt.Errorf("store lock: %w", err)
	}
	f, err := os.OpenFile(file+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store lock: %w", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errStoreInUse
		}
		return nil, fmt.Errorf("store lock %s.lock: %w", file, err)
	}
	return &storeLock{f: f}, nil
}
