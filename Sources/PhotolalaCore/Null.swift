/// An optional field written as `null` when it has no value, instead of being left out:
/// the contract shows `"pauseReason": null`, and scripts test for the key. Reading accepts
/// the key missing (an older daemon's status) as nil.
@propertyWrapper
package struct Null<Value: Codable & Sendable & Equatable>: Codable, Sendable, Equatable {
    package var wrappedValue: Value?

    package init(wrappedValue: Value?) {
        self.wrappedValue = wrappedValue
    }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        wrappedValue = c.decodeNil() ? nil : try c.decode(Value.self)
    }

    package func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        if let wrappedValue { try c.encode(wrappedValue) } else { try c.encodeNil() }
    }
}

extension KeyedDecodingContainer {
    package func decode<V>(_ type: Null<V>.Type, forKey key: Key) throws -> Null<V> {
        try decodeIfPresent(type, forKey: key) ?? Null(wrappedValue: nil)
    }
}
