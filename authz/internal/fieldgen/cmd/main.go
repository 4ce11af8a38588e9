// Command cmd is fieldgen's go generate entry point: it writes the code that
// converts, prunes, keys and encodes a policy input type, from that type's
// declaration in the current directory (see package fieldgen), and with
// -paths the type's member paths into a package of their own.
//
//	go run ./internal/fieldgen/cmd -root Input -out fields_gen.go -paths inputpaths/paths_gen.go
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/writ-authz/writ/authz/internal/fieldgen"
)

func main() {
	root := flag.String("root", "", "the input document's struct type")
	out := flag.String("out", "", "the file to write")
	paths := flag.String("paths", "", "also write the member paths to this file (its directory names its package)")
	flag.Parse()
	if *root == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: fieldgen -root Type -out file.go [-paths dir/file.go]")
		os.Exit(2)
	}
	o := fieldgen.Options{Dir: ".", Root: *root, Command: "go generate ./authz"}
	src, err := fieldgen.Generate(o)
	if err == nil {
		err = write(*out, src)
	}
	if err == nil && *paths != "" {
		if src, err = fieldgen.GeneratePaths(o, filepath.Base(filepath.Dir(*paths))); err == nil {
			err = write(*paths, src)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func write(path string, src []byte) error {
	return os.WriteFile(path, src, 0o644) //nolint:gosec // generated source, readable like the rest
}
