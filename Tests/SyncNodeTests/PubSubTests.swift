import Decide
import DecideCore
import DecideRESP
import Foundation
import Testing
@testable import SyncNodeServer
@testable import syncnode

/// Keyspace notifications: SUBSCRIBE / PSUBSCRIBE on `__keyspace@0__`, `__keyevent@0__` and
/// `__decide@0__` for local, replicated and catch-up changes; the subscribed state in RESP2
/// and RESP3; a subscriber that stops reading is disconnected.
extension SyncNodeTests {
    @Suite struct PubSubTests {
        static func message(_ channel: String, _ payload: String) -> RESPValue {
            .array([bulk("message"), bulk(channel), bulk(payload)])
        }

        static func pmessage(_ pattern: String, _ channel: String, _ payload: String) -> RESPValue {
            .array([bulk("pmessage"), bulk(pattern), bulk(channel), bulk(payload)])
        }

        /// The JSON payload of a `__decide@0__` pmessage on `channel`.
        static func decidePayload(_ reply: RESPValue, channel: String) throws -> [String: Any] {
            guard let items = reply.elements, items.count == 4, items[0] == bulk("pmessage"), items[2] == bulk(channel),
                  case .bulk(let payload) = items[3],
                  let json = try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any]
            else { throw TestFailure("not a \(channel) pmessage: \(reply)") }
            return json
        }

        @Test func subscribersHearLocalAndReplicatedChanges() async throws {
            try await withPair { a, b in
                let channel = try b.client()
                #expect(try channel.call("SUBSCRIBE", "__keyspace@0__:k")
                        == .array([bulk("subscribe"), bulk("__keyspace@0__:k"), .integer(1)]))
                let pattern = try b.client()
                #expect(try pattern.call("PSUBSCRIBE", "__keyspace@0__:*")
                        == .array([bulk("psubscribe"), bulk("__keyspace@0__:*"), .integer(1)]))
                let events = try b.client()
                try events.send("SUBSCRIBE", "__keyevent@0__:set", "__keyevent@0__:del")
                #expect(try events.reply() == .array([bulk("subscribe"), bulk("__keyevent@0__:set"), .integer(1)]))
                #expect(try events.reply() == .array([bulk("subscribe"), bulk("__keyevent@0__:del"), .integer(2)]))
                let decide = try b.client()
                #expect(try decide.call("PSUBSCRIBE", "__decide@0__:*")
                        == .array([bulk("psubscribe"), bulk("__decide@0__:*"), .integer(1)]))

                // A write on peer a, replicated to b.
                #expect(try a.client().call("SET", "k", "remote value") == ok)
                #expect(try channel.reply() == Self.message("__keyspace@0__:k", "set"))
                #expect(try pattern.reply() == Self.pmessage("__keyspace@0__:*", "__keyspace@0__:k", "set"))
                #expect(try events.reply() == Self.message("__keyevent@0__:set", "k"))
                let remote = try Self.decidePayload(try decide.reply(), channel: "__decide@0__:k")
                #expect(remote["origin"] as? String == "remote")
                #expect(remote["key"] as? String == "k")
                #expect(remote["value"] as? String == "remote value")
                #expect(remote["deleted"] as? Bool == false)
                #expect((remote["version"] as? [String: Any])?["node"] as? String == "a")

                // A delete on b itself.
                let local = try b.client()
                #expect(try local.call("DEL", "k") == .integer(1))
                #expect(try channel.reply() == Self.message("__keyspace@0__:k", "del"))
                #expect(try pattern.reply() == Self.pmessage("__keyspace@0__:*", "__keyspace@0__:k", "del"))
                #expect(try events.reply() == Self.message("__keyevent@0__:del", "k"))
                let deleted = try Self.decidePayload(try decide.reply(), channel: "__decide@0__:k")
                #expect(deleted["origin"] as? String == "local")
                #expect(deleted["deleted"] as? Bool == true)
                #expect(deleted["value"] is NSNull)

                // Another key reaches the pattern but not the exact channel: the channel's next
                // message is the later write of k.
                #expect(try local.call("MSET", "other", "{\"n\":1}", "quota[x]", "2") == ok)
                #expect(try local.call("SET", "k", "again") == ok)
                #expect(try channel.reply() == Self.message("__keyspace@0__:k", "set"))
                #expect(try pattern.reply() == Self.pmessage("__keyspace@0__:*", "__keyspace@0__:other", "set"))
                #expect(try pattern.reply() == Self.pmessage("__keyspace@0__:*", "__keyspace@0__:quota[\"x\"]", "set"))
                #expect(try pattern.reply() == Self.pmessage("__keyspace@0__:*", "__keyspace@0__:k", "set"))
                #expect(try events.reply() == Self.message("__keyevent@0__:set", "other"))
                let other = try Self.decidePayload(try decide.reply(), channel: "__decide@0__:other")
                #expect((other["value"] as? [String: Any])?["n"] as? Int == 1)
                // A delete of an absent key changes nothing and tells nobody.
                #expect(try local.call("DEL", "never-was") == .integer(0))
                #expect(try local.call("SET", "k", "last") == ok)
                #expect(try channel.reply() == Self.message("__keyspace@0__:k", "set"))
                #expect(try events.reply() == Self.message("__keyevent@0__:set", "quota[\"x\"]"))
                #expect(try events.reply() == Self.message("__keyevent@0__:set", "k"))
                #expect(try events.reply() == Self.message("__keyevent@0__:set", "k"))
            }
        }

        @Test func aRESP2SubscriberIsLimitedToSubscriptionCommands() async throws {
            try await withPeer("sub2") { peer in
                let client = try peer.client()
                try client.send("SUBSCRIBE", "one", "two")
                #expect(try client.reply() == .array([bulk("subscribe"), bulk("one"), .integer(1)]))
                #expect(try client.reply() == .array([bulk("subscribe"), bulk("two"), .integer(2)]))
                #expect(try client.call("GET", "k") == .error(
                    "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"))
                #expect(try client.call("SET", "k", "v").errorText?.hasPrefix("ERR Can't execute 'set'") == true)
                #expect(try client.call("PING") == .array([bulk("pong"), bulk("")]))
                #expect(try client.call("PING", "hi") == .array([bulk("pong"), bulk("hi")]))
                #expect(try client.call("PSUBSCRIBE", "p*") == .array([bulk("psubscribe"), bulk("p*"), .integer(3)]))
                // Subscribing twice to a channel counts it once.
                #expect(try client.call("SUBSCRIBE", "one") == .array([bulk("subscribe"), bulk("one"), .integer(3)]))
                // UNSUBSCRIBE without arguments drops every channel (the pattern stays).
                try client.send("UNSUBSCRIBE")
                #expect(try client.reply() == .array([bulk("unsubscribe"), bulk("one"), .integer(2)]))
                #expect(try client.reply() == .array([bulk("unsubscribe"), bulk("two"), .integer(1)]))
                #expect(try client.call("GET", "k").errorText?.hasPrefix("ERR Can't execute 'get'") == true)
                #expect(try client.call("PUNSUBSCRIBE") == .array([bulk("punsubscribe"), bulk("p*"), .integer(0)]))
                // No subscription left: commands work again, and nothing is delivered any more.
                #expect(try client.call("UNSUBSCRIBE") == .array([bulk("unsubscribe"), .null, .integer(0)]))
                #expect(try client.call("SET", "one", "v") == ok)
                #expect(try client.call("GET", "k") == .null)
                #expect(try client.call("PING") == .simple("PONG"))
                // RESET leaves every subscription too.
                #expect(try client.call("SUBSCRIBE", "x") == .array([bulk("subscribe"), bulk("x"), .integer(1)]))
                #expect(try client.call("RESET") == .simple("RESET"))
                #expect(try client.call("GET", "k") == .null)
                #expect(try client.call("INFO", "clients").text?.contains("pubsub_clients:0\r\n") == true)
            }
        }

        @Test func aRESP3SubscriberGetsPushesAndKeepsIssuingCommands() async throws {
            try await withPeer("sub3") { peer in
                let client = try peer.client()
                _ = try client.call("HELLO", "3")
                try client.send("SUBSCRIBE", "__keyspace@0__:k")
                let (subscribed, bytes) = try client.rawReply()
                #expect(bytes.first == UInt8(ascii: ">"), "not a push: \(String(decoding: bytes, as: UTF8.self))")
                #expect(subscribed == .push([bulk("subscribe"), bulk("__keyspace@0__:k"), .integer(1)]))
                #expect(try client.call("GET", "k") == .null)
                #expect(try client.call("PING") == .simple("PONG"))
                let writer = try peer.client()
                #expect(try writer.call("SET", "k", "v") == ok)
                #expect(try client.reply() == .push([bulk("message"), bulk("__keyspace@0__:k"), bulk("set")]))
                // A command's reply and notifications interleave; the reply is still there.
                #expect(try writer.call("SET", "k", "w") == ok)
                try client.send("SET", "k", "mine")
                #expect(try client.reply(skippingPushes: true) == ok)
                try client.send("GET", "k")
                #expect(try client.reply(skippingPushes: true) == bulk("mine"))
                // Exactly two more notifications come: the writer's `w` and the subscriber's own write.
                let set = RESPValue.push([bulk("message"), bulk("__keyspace@0__:k"), bulk("set")])
                var pushes = client.pushes
                while pushes.count < 2 { pushes.append(try client.reply()) }
                #expect(pushes == [set, set])
                #expect(try client.call("UNSUBSCRIBE") == .push([bulk("unsubscribe"), bulk("__keyspace@0__:k"), .integer(0)]))
            }
        }

        /// A subscriber that never reads is disconnected once its unwritten notifications pass
        /// `maxSubscriberOutputBytes`; the node goes on serving everyone else.
        @Test func aSubscriberThatStopsReadingIsDisconnected() async throws {
            try await withPeer("slow") { peer in
                let endpoint = try CustomEndpoint(on: peer) { $0.maxSubscriberOutputBytes = 64 << 10 }
                defer { endpoint.stop() }
                let subscriber = try endpoint.client(receiveBufferBytes: 4096)
                #expect(try subscriber.call("PSUBSCRIBE", "*") == .array([bulk("psubscribe"), bulk("*"), .integer(1)]))
                let other = try endpoint.client()
                let value = try ValueMapping.stored(Array(repeating: UInt8(ascii: "x"), count: 8 << 10)[...])
                var writes = 0
                let disconnected = await eventually(30) {
                    for _ in 0 ..< 20 {
                        peer.node.decide(RawWrite(key: StateKey(name: "big:\(writes % 1000)"), value: value))
                        writes += 1
                    }
                    return peer.logs.contains("subscriber disconnected: it stopped reading its notifications")
                }
                #expect(disconnected, "still connected after \(writes) writes of 8 KiB")
                let line = peer.logs.all.first { $0.message == "subscriber disconnected: it stopped reading its notifications" }
                #expect(line?.metadata["maxSubscriberOutputBytes"] == "65536")
                // Its socket ends (after what the kernel already holds for it).
                let end = subscriber.readUntilClosed(timeout: 20)
                #expect(end.closed, "the subscriber's connection was not closed")
                // Everyone else is served: the other client of that endpoint, and the peer's own.
                #expect(try other.call("PING") == .simple("PONG"))
                #expect(try other.call("EXISTS", "big:0") == .integer(1))
                #expect(try other.call("INFO", "clients").text?.contains("pubsub_clients:0\r\n") == true)
                #expect(try peer.client().call("SET", "after", "1") == ok)
            }
        }

        /// Past `maxSubscriptionsPerConnection` a SUBSCRIBE is refused; the subscriptions made
        /// before the limit still deliver.
        @Test func subscriptionsPastTheLimitAreRefusedAndTheOthersDeliver() async throws {
            try await withPeer("limit") { peer in
                let endpoint = try CustomEndpoint(on: peer) { $0.maxSubscriptionsPerConnection = 2 }
                defer { endpoint.stop() }
                let subscriber = try endpoint.client()
                try subscriber.send("SUBSCRIBE", "__keyspace@0__:k", "__keyspace@0__:j", "__keyspace@0__:x")
                #expect(try subscriber.reply() == .array([bulk("subscribe"), bulk("__keyspace@0__:k"), .integer(1)]))
                #expect(try subscriber.reply() == .array([bulk("subscribe"), bulk("__keyspace@0__:j"), .integer(2)]))
                #expect(try subscriber.reply() == .error("ERR more than maxSubscriptionsPerConnection 2 subscriptions on one connection"))
                #expect(try subscriber.call("PSUBSCRIBE", "*").errorText?.hasPrefix("ERR more than maxSubscriptionsPerConnection") == true)
                #expect(try endpoint.client().call("SET", "k", "v") == ok)
                #expect(try subscriber.reply() == Self.message("__keyspace@0__:k", "set"))
            }
        }

        /// Changes that come faster than the loop turns them into notifications, past
        /// `maxQueuedNotificationBytes`, are dropped: a `__decide@0__` subscriber is told how
        /// many it missed; a subscriber that cannot be told (Redis's keyspace channels have no
        /// such message) is disconnected rather than left silently missing changes.
        @Test func droppedNotificationsAreToldOrTheSubscriberDisconnected() async throws {
            try await withPeer("gap") { peer in
                let endpoint = try CustomEndpoint(on: peer) { $0.maxQueuedNotificationBytes = 1024 }
                defer { endpoint.stop() }
                let watcher = try endpoint.client()
                #expect(try watcher.call("PSUBSCRIBE", "__decide@0__:*") == .array([bulk("psubscribe"), bulk("__decide@0__:*"), .integer(1)]))
                let keyspace = try endpoint.client()
                #expect(try keyspace.call("SUBSCRIBE", "__keyspace@0__:k") == .array([bulk("subscribe"), bulk("__keyspace@0__:k"), .integer(1)]))
                // One decision larger than the whole queue: dropped whatever the timing.
                let value = String(repeating: "v", count: 100)
                #expect(try endpoint.client().call(bytes: (["MSET", "k", value] + (0 ..< 50).flatMap { ["m\($0)", value] }).map { Array($0.utf8) }) == ok)
                let gap = try watcher.reply()
                let items = try #require(gap.elements)
                #expect(items.count == 3 && items[0] == bulk("message") && items[1] == bulk("__decide@0__"), "\(gap)")
                let note = items.last?.json
                #expect(note?["gap"] as? Int == 1, "\(gap)")
                #expect(peer.logs.contains("notifications dropped: changes came faster than subscribers were sent them"))
                let end = keyspace.readUntilClosed(timeout: 10)
                #expect(end.closed, "a keyspace subscriber silently missed a change: \(String(decoding: end.bytes, as: UTF8.self).debugDescription)")
                // Later changes flow again.
                #expect(try endpoint.client().call("SET", "k", "small") == ok)
                #expect(try Self.decidePayload(try watcher.reply(), channel: "__decide@0__:k")["value"] as? String == "small")
            }
        }

        /// A change a peer learns by anti-entropy (written on another peer while they were not
        /// linked) is published with origin `catch-up`.
        @Test func aCatchUpChangeIsPublishedAsCatchUp() async throws {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            try await withPeer("b") { b in
                let watcher = try b.client()
                #expect(try watcher.call("PSUBSCRIBE", "__decide@0__:*") == .array([bulk("psubscribe"), bulk("__decide@0__:*"), .integer(1)]))
                // c writes with no peer, stops, and comes back linked to b.
                try await withPeer("c", configure: { $0.dataDirectory = directory.path }) { c async throws in
                    #expect(try c.client().call("SET", "offline", "written alone") == ok)
                }
                try await withPeer("c", peers: [b.listenAddress], configure: { $0.dataDirectory = directory.path }) { c in
                    let payload = try Self.decidePayload(try watcher.reply(timeout: 20), channel: "__decide@0__:offline")
                    #expect(payload["origin"] as? String == "catch-up", "\(payload)")
                    #expect(payload["value"] as? String == "written alone")
                    #expect(c.isConnected(to: "b"))
                }
            }
        }
    }
}
