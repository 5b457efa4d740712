package domain

// ReviewOf lets the tests read the verb of a review annotation (reviewOf).
var ReviewOf = reviewOf

// Count and Size let the tests check a split: the chunks in all, and one's data length.
func (c Chunk) Count() int { return c.count }
func (c Chunk) Size() int  { return len(c.data) }
