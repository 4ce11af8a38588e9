package authz

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
// files are named name/<path> (Policy.Files), and its revision depends on
// their names and content alone, so the same embedded set has the same
// revision in every run and on every machine.
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
	h := sha256.New()
	files := make([]string, 0, len(p.Files))
	for _, f := range p.Files {
		rel, err := filepath.Rel(dir, f)
		if err != nil {
			return nil, err
		}
		files = append(files, name+"/"+filepath.ToSlash(rel))
	}
	sort.Strings(files)
	for _, f := range files {
		raw, err := fs.ReadFile(fsys, strings.TrimPrefix(f, name+"/"))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(raw))
		h.Write(raw)
	}
	p.Revision, p.Files = hex.EncodeToString(h.Sum(nil))[:16], files
	if opt.Facts != nil {
		digest, err := factsDigest(opt.Facts)
		if err != nil {
			return nil, err
		}
		p.Revision = withDigest(p.Revision, digest)
	}
	return p, nil
}
