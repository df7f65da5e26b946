"""Well-known Sudoku puzzles used across the Sudoku tests."""

# Well-known puzzles; their properties are checked by the solver, not taken on trust.
KNOWN = {
    # Norvig's first example: filled by singles alone.
    "easy": "003020600900305001001806400008102900700000008006708200002609500800203009005010300",
    # A 17-clue puzzle (the minimum number of clues for a unique solution).
    "seventeen": (
        "000000010400000000020000000000050407008000300001090000300400200050100000000806000"
    ),
    # A 17-clue puzzle that needs search.
    "seventeen_search": (
        "4.....8.5.3..........7......2.....6.....8.4......1.......6.3.7.5..2.....1.4......"
    ),
    # "AI Escargot" (Inkala, 2006).
    "escargot": "1....7.9..3..2...8..96..5....53..9...1..8...26....4...3......1..4......7..7...3..",
    # Inkala's 2012 "world's hardest Sudoku".
    "inkala": "8..........36......7..9.2...5...7.......457.....1...3...1....68..85...1..9....4..",
}
