// Command protogen generates adapters/a2a/a2apb10, the Go types of A2A
// 1.0's wire contract, from the specification's own proto
// (adapters/a2a/a2apb10/lf/a2a/v1/a2a.proto, byte for byte the file of the
// specification's release): `make proto` runs it, and its test checks that
// regenerating gives the committed bytes.
//
// The proto annotates its service and fields for the HTTP+JSON binding
// (google.api.http, method_signature, field_behavior): options that change
// nothing of the messages' wire form, and whose definitions (googleapis) are
// not part of protoc. protogen strips them from a temporary copy before
// protoc reads it. Only messages are generated (protoc-gen-go, no service
// stubs): writ's gRPC door relays calls without them, and the A2A adapter
// reads the messages.
//
//	go run ./internal/protogen [-protoc protoc] [-plugin protoc-gen-go] [-out adapters/a2a/a2apb10]
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Where the spec's proto sits below the package directory: its path is
// also the file's name in the protobuf registry, which must differ from
// a2a-go's 0.3 "a2a.proto" (both are linked into writ).
const (
	protoPath = "lf/a2a/v1/a2a.proto"
	goPackage = "github.com/writ-authz/writ/adapters/a2a/a2apb10"
	generated = "a2a.pb.go"
)

func main() {
	protoc := flag.String("protoc", "protoc", "the protoc binary")
	plugin := flag.String("plugin", "protoc-gen-go", "the protoc-gen-go binary")
	out := flag.String("out", "adapters/a2a/a2apb10", "the package directory (holding "+protoPath+")")
	flag.Parse()
	code, err := Generate(*protoc, *plugin, *out)
	if err == nil {
		err = os.WriteFile(filepath.Join(*out, generated), code, 0o600)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "protogen:", err)
		os.Exit(1)
	}
}

// Generate returns the Go code protoc generates from dir's proto.
func Generate(protoc, plugin, dir string) ([]byte, error) {
	src, err := os.ReadFile(filepath.Join(dir, protoPath))
	if err != nil {
		return nil, err
	}
	stripped, err := Strip(src)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "protogen")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	in := filepath.Join(tmp, "in")
	if err := os.MkdirAll(filepath.Join(in, filepath.Dir(protoPath)), 0o750); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(in, protoPath), stripped, 0o600); err != nil { //nolint:gosec // G703: a temporary copy under our own temp dir
		return nil, err
	}
	pluginPath, err := exec.LookPath(plugin)
	if err != nil {
		return nil, fmt.Errorf("protoc-gen-go: %w", err)
	}
	if pluginPath, err = filepath.Abs(pluginPath); err != nil {
		return nil, err
	}
	cmd := exec.Command(protoc, "-I", in, "--plugin=protoc-gen-go="+pluginPath, "--go_out="+tmp,
		"--go_opt=paths=source_relative", "--go_opt=M"+protoPath+"="+goPackage+";a2apb10", protoPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("protoc: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return os.ReadFile(filepath.Join(tmp, strings.TrimSuffix(protoPath, ".proto")+".pb.go"))
}

var (
	apiImport   = regexp.MustCompile(`(?m)^import "google/api/[a-z_]+\.proto";\n`)
	fieldOption = regexp.MustCompile(` \[\(google\.api\.field_behavior\) = [A-Z_]+\]`)
	methodSig   = regexp.MustCompile(`(?m)^[ \t]*option \(google\.api\.method_signature\) = "[^"\n]*";\n`)
	httpOption  = regexp.MustCompile(`(?m)^[ \t]*option \(google\.api\.http\) = \{`)
)

// Strip removes the google.api annotations from the proto (see the package
// doc). It fails on one it does not know, rather than leave protoc an
// import it cannot find.
func Strip(src []byte) ([]byte, error) {
	out := apiImport.ReplaceAll(src, nil)
	out = fieldOption.ReplaceAll(out, nil)
	out = methodSig.ReplaceAll(out, nil)
	for {
		loc := httpOption.FindIndex(out)
		if loc == nil {
			break
		}
		depth, end := 0, -1
		for i := loc[1] - 1; i < len(out); i++ {
			switch out[i] {
			case '{':
				depth++
			case '}':
				depth--
			}
			if depth == 0 {
				end = i
				break
			}
		}
		if end < 0 || end+2 >= len(out) || out[end+1] != ';' {
			return nil, errors.New("an unterminated google.api.http option")
		}
		end += 2 // past "};"
		if out[end] == '\n' {
			end++
		}
		out = append(out[:loc[0]:loc[0]], out[end:]...)
	}
	if i := bytes.Index(out, []byte("google.api")); i >= 0 {
		line := bytes.Count(out[:i], []byte("\n")) + 1
		return nil, fmt.Errorf("line %d of the stripped proto still names google.api: an annotation protogen does not know", line)
	}
	return out, nil
}
