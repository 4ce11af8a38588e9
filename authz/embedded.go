package authz

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// LoadPolicyFS loads a policy set held in a file system rather than on disk
// (the shipped policies embedded in the binary) exactly as LoadPolicy loads a
// directory: compiled, its own tests run, the decision query prepared. Its
// files are named name/<path> (Policy.Files). Its revision, like any set's,
// depends on the files' names inside the set and their content alone, so the
// embedded set has the same revision in every run, on every machine, and as
// the same files in a directory (policies/ of the checkout it was built from).
//
// The set is written to a private temporary directory for the loader and
// removed once loaded: nothing reads it afterwards, and there is nothing to
// reload (a binary's embedded files do not change).
func LoadPolicyFS(ctx context.Context, fsys fs.FS, name string, opt LoadOptions) (*Policy, error) {
	dir, err := os.MkdirTemp("", "writ-policies-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.CopyFS(dir, fsys); err != nil {
		return nil, fmt.Errorf("writing %s policies: %w", name, err)
	}
	p, err := LoadPolicy(ctx, []string{dir}, opt)
	if err != nil {
		return nil, fmt.Errorf("%s policies: %s", name, strings.ReplaceAll(err.Error(), dir, name))
	}
	files := make([]string, 0, len(p.Files))
	for _, f := range p.Files {
		rel, err := filepath.Rel(dir, f)
		if err != nil {
			return nil, err
		}
		files = append(files, name+"/"+filepath.ToSlash(rel))
	}
	sort.Strings(files)
	p.Files = files
	return p, nil
}
