import SyncNodeServer
import Foundation

/// The human form of a status reply:
///
///     node a  cluster decide  listen 127.0.0.1:7401  incarnation 1717171717171
///     entries 3 (1 deleted)  digest 5c1f0e2a9b3d4e61
///     tombstones 1  coverage 1717171719000.0 (1.2 s ago)  tombstone bound 1717171718500.3 (1.7 s ago)
///
///     MEMBER  ADDRESS         LINK       LAST HEARD  QUEUED  CATCH-UP  DROPPED
///     b       127.0.0.1:7402  connected  0.1 s ago   0 B     idle      0
///     c       127.0.0.1:7403  removed    never       0 B     idle      0
///
/// Coverage and the tombstone bound are hybrid-clock readings (`ms.logical`), with their age on
/// this machine's clock; `none` when not known yet.
enum StatusTable {
    static func render(_ reply: JSONValue, nowMilliseconds: UInt64 = UInt64(Date().timeIntervalSince1970 * 1000)) -> String {
        func text(_ value: JSONValue?) -> String {
            guard let value else { return "?" }
            return value.stringValue ?? value.compact()
        }
        var lines: [String] = []
        lines.append("node \(text(reply["node"]))  cluster \(text(reply["cluster"]))  listen \(text(reply["listen"]))  incarnation \(text(reply["incarnation"]))")
        var counts = "\(text(reply["tombstones"])) deleted"
        // Expiry counts only when there is something to say (and the peer reports them).
        if let expiring = reply["expiring"], let expired = reply["expired"],
           text(expiring) != "0" || text(expired) != "0" {
            counts += ", \(text(expiring)) expiring, \(text(expired)) expired"
        }
        lines.append("entries \(text(reply["entries"])) (\(counts))  digest \(text(reply["digest"]))")
        lines.append("tombstones \(text(reply["tombstones"]))  coverage \(clock(reply["coverage"], now: nowMilliseconds))"
                     + "  tombstone bound \(clock(reply["tombstoneBound"], now: nowMilliseconds))")
        if let forgotten = reply["forgottenMembers"], text(forgotten) != "0" {
            lines.append("removals remembered by id hash only: \(text(forgotten))")
        }
        lines.append("")
        guard case .array(let members)? = reply["members"], !members.isEmpty else {
            lines.append("no other members known")
            return lines.joined(separator: "\n")
        }
        var rows = [["MEMBER", "ADDRESS", "LINK", "LAST HEARD", "QUEUED", "CATCH-UP", "DROPPED"]]
        for member in members {
            rows.append([
                text(member["id"]), text(member["address"]), text(member["link"]),
                lastHeard(member["lastHeardMsAgo"]?.intValue), bytes(member["queuedBytes"]?.intValue ?? 0),
                text(member["catchUp"]), text(member["droppedDeltas"]),
            ])
        }
        let widths = (0 ..< rows[0].count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            let cells = row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }
            lines.append(cells.joined(separator: "  "))
        }
        return lines.joined(separator: "\n")
    }

    /// `ms.logical (N s ago)` for a `{"ms","logical"}` object; `none` for null or absent.
    private static func clock(_ value: JSONValue?, now: UInt64) -> String {
        guard let value, let ms = value["ms"]?.intValue, let logical = value["logical"]?.intValue, ms >= 0 else { return "none" }
        let physical = UInt64(ms)
        let age = physical <= now ? ago(Int(now - physical)) : "\(Int(physical - now) / 1000) s ahead of this clock"
        return "\(ms).\(logical) (\(age))"
    }

    private static func ago(_ milliseconds: Int) -> String {
        if milliseconds < 60_000 { return "\(milliseconds / 1000).\(milliseconds % 1000 / 100) s ago" }
        if milliseconds < 3_600_000 { return "\(milliseconds / 60_000) min ago" }
        return "\(milliseconds / 3_600_000) h ago"
    }

    private static func lastHeard(_ milliseconds: Int?) -> String {
        guard let milliseconds else { return "never" }
        if milliseconds < 60_000 {
            return "\(milliseconds / 1000).\(milliseconds % 1000 / 100) s ago"
        }
        return "\(milliseconds / 60_000) min ago"
    }

    private static func bytes(_ count: Int) -> String {
        if count < 1024 { return "\(count) B" }
        if count < 1 << 20 { return "\(count / 1024) KiB" }
        return "\(count >> 20) MiB"
    }
}
