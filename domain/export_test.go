package domain

// ReviewOf lets the tests read the verb of a review annotation (reviewOf).
var ReviewOf = reviewOf
