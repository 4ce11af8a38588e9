package authz

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// policyFile is one file of a policy set: its name inside the set and its
// content.
type policyFile struct {
	name string
	raw  []byte
}

// revisionOf is the revision of the policy and data files under paths, and
// the files' paths on disk (sorted). The revision is a digest of each file's
// name inside the set and its content, never of where the set lives: a file
// under a directory given is named by its path below that directory (a data
// file's directories are its place in data), a file given by itself by its
// base name. So the same files give the same revision from any directory, from
// a ConfigMap listed file by file or mounted whole, and embedded in the binary,
// and a reload to the same content elsewhere is no change.
func revisionOf(paths []string) (string, []string, error) {
	var files []policyFile
	var onDisk []string
	for _, root := range paths {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path != root && strings.HasPrefix(d.Name(), "..") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() || !isPolicyFile(path) {
				return nil
			}
			name := filepath.Base(path)
			if path != root {
				rel, err := filepath.Rel(root, path)
				if err != nil {
					return err
				}
				name = rel
			}
			raw, err := os.ReadFile(path) //nolint:gosec // G122: the operator's own policy directory, read at load; nothing here is an attacker's path
			if err != nil {
				return err
			}
			files = append(files, policyFile{name: filepath.ToSlash(name), raw: raw})
			onDisk = append(onDisk, path)
			return nil
		})
		if err != nil {
			return "", nil, err
		}
	}
	slices.Sort(onDisk)
	return digestFiles(files), onDisk, nil
}

// isPolicyFile reports whether the loader reads a file (policyFiles).
func isPolicyFile(path string) bool {
	switch filepath.Ext(path) {
	case ".rego", ".json", ".yaml", ".yml":
		return true
	}
	return false
}

// digestFiles is the revision of a set of files: sorted by name (then by
// content, for one name under two paths given), each name, length and
// content hashed.
func digestFiles(files []policyFile) string {
	slices.SortFunc(files, func(a, b policyFile) int {
		return cmp.Or(strings.Compare(a.name, b.name), bytes.Compare(a.raw, b.raw))
	})
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00", f.name, len(f.raw))
		h.Write(f.raw)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
