// Package seedagents runs the real upstream agents (A2A 0.3 on a2a-go, and ACP) that writ is put in front of by tests and `writ demo`.
package seedagents
