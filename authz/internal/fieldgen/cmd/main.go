// Command cmd is fieldgen's go generate entry point: it writes the code that
// converts, prunes and keys a policy input type, from that type's declaration
// in the current directory (see package fieldgen).
//
//	go run ./internal/fieldgen/cmd -root Input -out fields_gen.go
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/writ-authz/writ/authz/internal/fieldgen"
)

func main() {
	root := flag.String("root", "", "the input document's struct type")
	out := flag.String("out", "", "the file to write")
	flag.Parse()
	if *root == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: fieldgen -root Type -out file.go")
		os.Exit(2)
	}
	src, err := fieldgen.Generate(fieldgen.Options{Dir: ".", Root: *root, Command: "go generate ./authz"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil { //nolint:gosec // generated source, readable like the rest
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
