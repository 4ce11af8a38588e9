package wire

// Rendered is a complete HTTP answer an adapter produced (an error or a card).
type Rendered struct {
	Status      int
	ContentType string
	Body        []byte
}
