package task_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"

	"github.com/writ-authz/writ/task"
)

// TestOperationsListsEveryOperation: every Operation constant the package
// declares is in Operations exactly once, so a new operation cannot be
// declared without its facts (and partial evaluation, metrics and the core
// all see it).
func TestOperationsListsEveryOperation(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "request.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []task.Operation
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Operation" {
				continue
			}
			for _, val := range v.Values {
				op, err := strconv.Unquote(val.(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				declared = append(declared, task.Operation(op))
			}
		}
	}
	if len(declared) < 13 {
		t.Fatalf("found %d operation constants in request.go", len(declared))
	}
	var listed []task.Operation
	for _, f := range task.Operations() {
		if slices.Contains(listed, f.Op) {
			t.Errorf("%s is listed twice", f.Op)
		}
		listed = append(listed, f.Op)
	}
	for _, op := range declared {
		if !slices.Contains(listed, op) || !op.Known() {
			t.Errorf("%s is declared but not in Operations", op)
		}
	}
	if len(listed) != len(declared) {
		t.Errorf("Operations lists %v, request.go declares %v", listed, declared)
	}
	if task.Operation("frobnicate").Known() || task.Operation("").Known() {
		t.Error("an unknown operation is known")
	}
}

// TestOperationFacts: the facts the core acts on, as it acted on them when
// each was a switch of its own.
func TestOperationFacts(t *testing.T) {
	for _, f := range task.Operations() {
		op := f.Op
		follow := slices.Contains([]task.Operation{task.OpGet, task.OpCancel, task.OpSubscribe,
			task.OpPushSet, task.OpPushGet, task.OpPushList, task.OpPushDelete}, op)
		streams := op == task.OpStream || op == task.OpSubscribe
		push := slices.Contains([]task.Operation{task.OpPushSet, task.OpPushGet, task.OpPushList, task.OpPushDelete}, op)
		if op.FollowUp() != follow || op.Streams() != streams || op.PushConfig() != push {
			t.Errorf("%s: follow-up %v streams %v push %v", op, op.FollowUp(), op.Streams(), op.PushConfig())
		}
	}
	if task.Operation("x").FollowUp() || task.Operation("x").Streams() || task.Operation("x").PushConfig() {
		t.Error("an unknown operation has facts")
	}
}
