import DecideRESP
import DecideUV

/// The cluster secrets through the client endpoint (docs/operations.md, "Rotating the cluster
/// secret"): `DECIDE.REKEY` re-reads the cluster secret and accepted secrets files, as SIGHUP
/// does, and replies `+OK sealing with FP, accepting FP,FP` or the reason nothing changed. INFO
/// shows the fingerprints in use and the secret sealing each link.
extension RESPService {
    /// What the endpoint may do with the peer's secrets.
    package struct SecretsControl: Sendable {
        /// Re-reads the files and applies them; the summary, or why nothing changed.
        package let reload: @Sendable () throws -> String
        /// The fingerprints in use, the sealing one first.
        package let fingerprints: @Sendable () -> [String]
        /// The established links and the secrets sealing them.
        package let links: @Sendable () -> [UVTransport.SealedLink]

        package init(reload: @escaping @Sendable () throws -> String, fingerprints: @escaping @Sendable () -> [String],
                     links: @escaping @Sendable () -> [UVTransport.SealedLink]) {
            self.reload = reload
            self.fingerprints = fingerprints
            self.links = links
        }
    }

    func rekey(into writer: inout RESPWriter) {
        guard let secrets = configuration.secrets else {
            writer.error("ERR this peer runs without a cluster secret; start it with --cluster-secret-file to seal links")
            return
        }
        do {
            writer.simpleString("OK " + (try secrets.reload()))
        } catch {
            writer.error("ERR cluster secrets not reloaded, the old ones stay: \(error)")
        }
    }

    /// INFO decide's lines about secrets.
    func secretInfoLines() -> [String] {
        guard let secrets = configuration.secrets else { return ["cluster_secret:none", "accepted_secrets:"] }
        let names = secrets.fingerprints()
        return ["cluster_secret:\(names.first ?? "none")", "accepted_secrets:\(names.joined(separator: ","))"]
    }

    /// The `sealed=OUT/IN` part of INFO replication's line of `peer` (empty when not sealed).
    func sealDescription(of peer: String, links: [UVTransport.SealedLink]) -> String {
        guard let link = links.first(where: { $0.peerNodeID == peer }) else { return "" }
        return ",sealed=\(link.sendsUnder)/\(link.receivesUnder)"
    }
}
