package decisionlog

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// rotatingFile is an append-only file rotated by size: path, path.1 (the newest
// rotated) … path.N. It is used by the writer goroutine alone.
//
// Why not gopkg.in/natefinch/lumberjack.v2 (v2.2.1): it names a backup by the
// rotation time to the millisecond (name-2006-01-02T15-04-05.000.ext) and
// moves the live file there with os.Rename, which replaces an existing file:
// two rotations within one millisecond (a line larger than max_size_mb
// followed by any other line; a burst at a small size) silently lose the
// first backup. An audit log must not lose a line, and TestRotation rotates
// six times in microseconds and checks every kept line. Its backups are also
// removed asynchronously (a goroutine per Logger), so the bound on backups
// holds only eventually, and it rotates inside Write without knowing line
// boundaries, which the writer here owns (a file always ends at a line).
type rotatingFile struct {
	path     string
	maxBytes int64
	backups  int
	f        *os.File
	size     int64
	// special: the live path is not a regular file (a device such as
	// /dev/null or /dev/stdout, a FIFO read by a log shipper). It is never
	// rotated: rotating would remove or rename the device and put a regular
	// file in its place.
	special bool
}

func openRotating(path string, maxBytes int64, backups int) (*rotatingFile, error) {
	r := &rotatingFile{path: path, maxBytes: maxBytes, backups: backups}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

// open opens (creating 0600) the live file for appending and learns its size.
func (r *rotatingFile) open() error {
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	r.f, r.size, r.special = f, st.Size(), !st.Mode().IsRegular()
	return nil
}

// full reports whether a line of n bytes, after pending bytes not yet
// written, would take a non-empty file beyond the threshold. A line larger than
// the threshold goes alone into a fresh file.
func (r *rotatingFile) full(pending, n int) bool {
	if r.special {
		return false
	}
	cur := r.size + int64(pending)
	return cur > 0 && cur+int64(n) > r.maxBytes
}

// Write appends p, reopening the live file if an earlier rotation left none.
func (r *rotatingFile) Write(p []byte) (int, error) {
	if r.f == nil {
		if err := r.open(); err != nil {
			return 0, err
		}
	}
	n, err := r.f.Write(p)
	if err != nil && n > 0 {
		// A short write (a full disk) leaves part of a line: cut it off, so
		// that the file still ends at a line and the chain, which the writer
		// puts back to the last line written, stays whole.
		if terr := r.f.Truncate(r.size); terr != nil {
			r.size += int64(n)
			return n, errors.Join(err, terr)
		}
		return 0, err
	}
	r.size += int64(n)
	return n, err
}

// rotate shifts path.i to path.i+1 (dropping the oldest beyond backups) and
// path to path.1, then opens a fresh live file.
func (r *rotatingFile) rotate() error {
	var errs []error
	if r.f != nil {
		errs = append(errs, r.f.Close())
		r.f = nil
	}
	if r.backups > 0 {
		errs = append(errs, ignoreMissing(os.Remove(r.name(r.backups))))
		for i := r.backups - 1; i >= 1; i-- {
			errs = append(errs, ignoreMissing(os.Rename(r.name(i), r.name(i+1))))
		}
		errs = append(errs, ignoreMissing(os.Rename(r.path, r.name(1))))
	} else {
		errs = append(errs, ignoreMissing(os.Remove(r.path)))
	}
	errs = append(errs, r.removeStale())
	errs = append(errs, r.open())
	return errors.Join(errs...)
}

// Close closes the live file.
func (r *rotatingFile) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// removeStale removes the backups numbered beyond the count, left by an
// earlier, larger max_backups.
func (r *rotatingFile) removeStale() error {
	dir, base := filepath.Split(r.path)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		suffix, ok := strings.CutPrefix(e.Name(), base+".")
		if !ok {
			continue
		}
		if i, err := strconv.Atoi(suffix); err == nil && i > r.backups && strconv.Itoa(i) == suffix {
			errs = append(errs, ignoreMissing(os.Remove(filepath.Join(dir, e.Name()))))
		}
	}
	return errors.Join(errs...)
}

func (r *rotatingFile) name(i int) string { return r.path + "." + strconv.Itoa(i) }

func ignoreMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
