package filestore_test

import (
	"path/filepath"
	"testing"

	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/filestore"
	"github.com/writ-authz/writ/task/storetest"
)

func open(t testing.TB, path string, l task.MemoryLimits, o filestore.Options) *filestore.Store {
	t.Helper()
	s, err := filestore.Open(path, l, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func tempPath(t testing.TB) string { return filepath.Join(t.TempDir(), "state", "writ.db") }

func TestContract(t *testing.T) {
	storetest.Suite{New: func(t *testing.T, l task.MemoryLimits) task.Store {
		return open(t, tempPath(t), l, filestore.Options{})
	}}.Run(t)
}

func TestWorkContract(t *testing.T) {
	storetest.WorkSuite{New: func(t *testing.T, l task.WorkLimits) task.WorkQueue {
		return open(t, tempPath(t), task.MemoryLimits{}, filestore.Options{Work: l})
	}}.Run(t)
}
