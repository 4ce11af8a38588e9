package task

// OperationFacts is what writ's parts need to know of one operation, stated
// once: partial evaluation builds a residual per known operation, metrics
// bound their operation label to the known ones, and the admission core
// reads the rest.
type OperationFacts struct {
	Op Operation
	// FollowUp: the operation acts on an existing task the request names, so
	// ownership and the lifecycle law apply.
	FollowUp bool
	// Streams: the agent answers with an event stream.
	Streams bool
	// PushConfig: the operation manages a task's push configs (which writ
	// serves itself when it delivers push notifications).
	PushConfig bool
}

// operations is the one list of operations, in the order the policy
// contract documents them.
var operations = [...]OperationFacts{
	{Op: OpSend},
	{Op: OpStream, Streams: true},
	{Op: OpGet, FollowUp: true},
	{Op: OpList},
	{Op: OpCancel, FollowUp: true},
	{Op: OpSubscribe, FollowUp: true, Streams: true},
	{Op: OpPushSet, FollowUp: true, PushConfig: true},
	{Op: OpPushGet, FollowUp: true, PushConfig: true},
	{Op: OpPushList, FollowUp: true, PushConfig: true},
	{Op: OpPushDelete, FollowUp: true, PushConfig: true},
	{Op: OpCard},
	{Op: OpExtendedCard},
	{Op: OpDiscover},
}

// byOp indexes operations, for the per-request questions below.
var byOp = func() map[Operation]OperationFacts {
	m := make(map[Operation]OperationFacts, len(operations))
	for _, f := range operations {
		m[f.Op] = f
	}
	return m
}()

// Operations is every operation writ knows with its facts (a copy: the list
// is read-only).
func Operations() []OperationFacts { return append([]OperationFacts(nil), operations[:]...) }

// Known reports whether o is one of Operations.
func (o Operation) Known() bool {
	_, ok := byOp[o]
	return ok
}

// FollowUp reports whether the operation acts on an existing task named by the
// request (and so is subject to ownership and lifecycle checks).
func (o Operation) FollowUp() bool { return byOp[o].FollowUp }

// Streams reports whether the agent answers the operation with an event stream.
func (o Operation) Streams() bool { return byOp[o].Streams }

// PushConfig reports whether the operation manages a task's push configs.
func (o Operation) PushConfig() bool { return byOp[o].PushConfig }
