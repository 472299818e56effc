"""einc's ground floor: names and maps every other layer shares (attribute names, dtypes).
Nothing here imports from the rest of einc."""
