package task_test

import (
	"testing"

	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/storetest"
)

func TestMemoryStoreContract(t *testing.T) {
	storetest.Suite{New: func(_ *testing.T, l task.MemoryLimits) task.Store { return task.NewMemoryStore(l) }}.Run(t)
}
