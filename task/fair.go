package task

import "container/list"

// fairIndex keeps, per owner, that owner's items in update order (finished
// items apart from live ones), and the owners ranked by how many items they
// hold, so that both "this owner's oldest" and "the heaviest owner" are O(1).
// It is what makes eviction fair: a store at its bound takes from whoever holds
// the most, never from a quiet owner because a noisy one filled the store.
// Not safe for concurrent use: the store's lock guards it.
type fairIndex struct {
	owners map[string]*ownerItems
	// buckets[n] lists the owners holding exactly n items, in the order they
	// reached n; top is the largest n with a non-empty bucket.
	buckets map[int]*list.List
	top     int
}

// ownerItems is one owner's items, each list least recently updated first.
type ownerItems struct {
	live, done list.List
	bucket     *list.Element // this owner in buckets[count]
}

func (o *ownerItems) count() int { return o.live.Len() + o.done.Len() }

func newFairIndex() fairIndex {
	return fairIndex{owners: map[string]*ownerItems{}, buckets: map[int]*list.List{}}
}

// add appends v to owner's live (or, done, finished) items.
func (f *fairIndex) add(owner string, v any, done bool) *list.Element {
	o := f.owners[owner]
	if o == nil {
		o = &ownerItems{}
		f.owners[owner] = o
	}
	n := o.count()
	var el *list.Element
	if done {
		el = o.done.PushBack(v)
	} else {
		el = o.live.PushBack(v)
	}
	f.rank(owner, o, n, n+1)
	return el
}

// remove drops el, one of owner's items (done says which list holds it).
func (f *fairIndex) remove(owner string, el *list.Element, done bool) {
	o := f.owners[owner]
	if o == nil {
		return
	}
	n := o.count()
	if done {
		o.done.Remove(el)
	} else {
		o.live.Remove(el)
	}
	f.rank(owner, o, n, n-1)
	if n-1 == 0 {
		delete(f.owners, owner)
	}
}

// touch makes el its owner's most recently updated item.
func (f *fairIndex) touch(owner string, el *list.Element, done bool) {
	if o := f.owners[owner]; o != nil {
		if done {
			o.done.MoveToBack(el)
		} else {
			o.live.MoveToBack(el)
		}
	}
}

// finish moves a live item to owner's finished items and returns its new element.
func (f *fairIndex) finish(owner string, el *list.Element) *list.Element {
	o := f.owners[owner]
	v := o.live.Remove(el)
	return o.done.PushBack(v)
}

// count is how many items owner holds.
func (f *fairIndex) count(owner string) int {
	if o := f.owners[owner]; o != nil {
		return o.count()
	}
	return 0
}

// oldest is owner's least recently updated item, a finished one first.
func (f *fairIndex) oldest(owner string) (v any, ok bool) {
	o := f.owners[owner]
	switch {
	case o == nil:
		return nil, false
	case o.done.Len() > 0:
		return o.done.Front().Value, true
	case o.live.Len() > 0:
		return o.live.Front().Value, true
	}
	return nil, false
}

// heaviest is the owner holding the most items (the first to reach that many).
func (f *fairIndex) heaviest() (string, bool) {
	b := f.buckets[f.top]
	if b == nil || b.Len() == 0 {
		return "", false
	}
	return b.Front().Value.(string), true
}

// rank moves owner from the bucket of count from to that of count to.
func (f *fairIndex) rank(owner string, o *ownerItems, from, to int) {
	if o.bucket != nil {
		b := f.buckets[from]
		b.Remove(o.bucket)
		if b.Len() == 0 {
			delete(f.buckets, from)
		}
		o.bucket = nil
	}
	if to > 0 {
		b := f.buckets[to]
		if b == nil {
			b = list.New()
			f.buckets[to] = b
		}
		o.bucket = b.PushBack(owner)
	}
	switch {
	case to > f.top:
		f.top = to
	case from == f.top && f.buckets[from] == nil:
		// Counts move by one, so the next rank down holds this owner, or no
		// owner holds anything.
		f.top = to
	}
}
