/// Prints aligned plain-text tables, so every bench section reads the same way.
enum BenchTable {
    static func print(rows: [[String]], header: [String]) {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                cell + String(repeating: " ", count: widths[index] - cell.count)
            }.joined(separator: "  ")
        }
        Swift.print(line(header))
        Swift.print(line(widths.map { String(repeating: "-", count: $0) }))
        for row in rows { Swift.print(line(row)) }
        Swift.print("")
    }

    /// "met" or "not met" beside a goal, the way every section words it.
    static func verdict(_ met: Bool) -> String { met ? "met" : "not met" }
}
