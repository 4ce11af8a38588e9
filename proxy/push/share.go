package push

// The workers are shared: a job goes to them only while its receiver host and
// its owner are within their shares (MaxPerHost, MaxPerOwner attempts in
// flight or waiting for a worker); otherwise it is parked until one of theirs
// lands. So a receiver that hangs for AttemptTimeout on every attempt, or one
// caller's flood of callbacks, holds at most its share of the workers, and
// every other delivery goes on. A destination's order is kept: its next job
// is started only when the previous one finished.

// fitsLocked reports whether j's host and owner are within their shares (a
// notification that names no owner has only its host's).
func (d *Deliverer) fitsLocked(j *job) bool {
	return d.byHost[j.host] < d.cfg.MaxPerHost && (j.n.Owner == "" || d.byOwner[j.n.Owner] < d.cfg.MaxPerOwner)
}

// startLocked hands j to the workers, or parks it until its shares allow.
// d.mu must be held.
func (d *Deliverer) startLocked(j *job) {
	if !d.fitsLocked(j) {
		d.parked = append(d.parked, j)
		return
	}
	d.byHost[j.host]++
	d.byOwner[j.n.Owner]++
	j.flying = true
	d.ready <- j // never blocks: len(ready) <= pending <= QueueSize
}

// land releases j's shares after an attempt (or when it leaves the workers
// without one), and starts the parked jobs that now fit, oldest first.
func (d *Deliverer) land(j *job) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !j.flying {
		return
	}
	j.flying = false
	if d.byHost[j.host]--; d.byHost[j.host] <= 0 {
		delete(d.byHost, j.host)
	}
	if d.byOwner[j.n.Owner]--; d.byOwner[j.n.Owner] <= 0 {
		delete(d.byOwner, j.n.Owner)
	}
	kept := d.parked[:0]
	for _, p := range d.parked {
		if d.fitsLocked(p) {
			d.byHost[p.host]++
			d.byOwner[p.n.Owner]++
			p.flying = true
			d.ready <- p
			continue
		}
		kept = append(kept, p)
	}
	clear(d.parked[len(kept):])
	d.parked = kept
}
