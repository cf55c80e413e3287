package supervisor

// TTYSize is a terminal's size in character cells.
type TTYSize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}
