package adapters_test

import (
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-authz/writ/adapters"
	"github.com/writ-authz/writ/adapters/wire"
)

// TestDecisionHeadersAreEveryHeaderParseReads: over every captured request
// (testdata/a2a, testdata/acp), removing any header an edge does not name in
// DecisionHeaders leaves what Parse makes of the request unchanged, fault
// included: the list the core checks Connection against is complete. And
// the list is not vacuous: dropping the version or the content type changes
// the parse of some A2A request.
func TestDecisionHeadersAreEveryHeaderParseReads(t *testing.T) {
	var files []string
	for _, dir := range []string{"../testdata/a2a", "../testdata/acp"} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".request.http") {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 50 {
		t.Fatalf("only %d fixtures", len(files))
	}
	route, err := adapters.NewRoute("auto", "/")
	if err != nil {
		t.Fatal(err)
	}
	matters := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in, err := wire.ReadMessage(raw, 0)
		if err != nil {
			continue // a fixture of a message that is not HTTP at all
		}
		edge := route.For(in.Path)
		named := map[string]bool{}
		for _, h := range edge.DecisionHeaders() {
			named[http.CanonicalHeaderKey(h)] = true
		}
		want, wantF := edge.Parse(in, wire.Limits{})
		for k := range in.Header {
			without := in
			without.Header = in.Header.Clone()
			without.Header.Del(k)
			got, gotF := edge.Parse(without, wire.Limits{})
			same := reflect.DeepEqual(got, want) && reflect.DeepEqual(gotF, wantF)
			switch {
			case !same && !named[k]:
				t.Errorf("%s: %s changes what %s's Parse reads, and its DecisionHeaders do not name it", f, k, edge.Name())
			case !same:
				matters[edge.Name()+" "+k] = true
			}
		}
	}
	for _, want := range []string{"a2a A2A-Version", "a2a Content-Type"} {
		if n, k, _ := strings.Cut(want, " "); !matters[n+" "+http.CanonicalHeaderKey(k)] {
			t.Errorf("no fixture's parse depends on %s", want)
		}
	}
}
