package task_test

import (
	"testing"

	"github.com/writ-authz/writ/task"
	"github.com/writ-authz/writ/task/storetest"
)

func TestMemoryWorkQueueContract(t *testing.T) {
	storetest.WorkSuite{New: func(_ *testing.T, l task.WorkLimits) task.WorkQueue { return task.NewMemoryWorkQueue(l) }}.Run(t)
}
