//! Names of enumerated GGUF metadata values (`general.file_type: 15 (MOSTLY_Q4_K_M)`), shown
//! beside the number in `inspect` and `diff`; the canonical JSON keeps the number alone.

#[path = "enums_table.rs"]
mod table;

use crate::artifact::Value;

/// The name gguf-py gives `value` of `key`, when `key` is an enumerated key and the value
/// one of its members.
pub(crate) fn enum_name(key: &str, value: &Value) -> Option<&'static str> {
    let table: &[(u64, &str)] = match key {
        "general.file_type" => &table::FILE_TYPES,
        _ => match key.split_once('.') {
            Some((arch, "pooling_type")) if !arch.is_empty() => &table::POOLING_TYPES,
            Some((arch, "expert_gating_func")) if !arch.is_empty() => &table::EXPERT_GATING_FUNCS,
            _ => return None,
        },
    };
    let number = integer(value)?;
    table
        .iter()
        .find(|(member, _)| *member == number)
        .map(|(_, name)| *name)
}

/// ` (MOSTLY_Q4_K_M)` after an enumerated value, or nothing.
pub(crate) fn enum_note(key: &str, value: &Value) -> String {
    enum_name(key, value).map_or_else(String::new, |name| format!(" ({name})"))
}

fn integer(value: &Value) -> Option<u64> {
    match *value {
        Value::U8(v) => Some(v.into()),
        Value::U16(v) => Some(v.into()),
        Value::U32(v) => Some(v.into()),
        Value::U64(v) => Some(v),
        Value::I8(v) => u64::try_from(v).ok(),
        Value::I16(v) => u64::try_from(v).ok(),
        Value::I32(v) => u64::try_from(v).ok(),
        Value::I64(v) => u64::try_from(v).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_file_type_pooling_and_gating_and_nothing_else() {
        assert_eq!(
            enum_name("general.file_type", &Value::U32(15)),
            Some("MOSTLY_Q4_K_M")
        );
        assert_eq!(enum_name("bert.pooling_type", &Value::U32(2)), Some("CLS"));
        assert_eq!(
            enum_name("qwen3moe.expert_gating_func", &Value::I32(2)),
            Some("SIGMOID")
        );
        assert_eq!(enum_name("general.file_type", &Value::U32(4)), None);
        assert_eq!(enum_name("general.file_type", &Value::I32(-1)), None);
        assert_eq!(enum_name("llama.context_length", &Value::U32(15)), None);
        assert_eq!(enum_name("a.b.pooling_type", &Value::U32(1)), None);
        assert_eq!(
            enum_note("general.file_type", &Value::U32(1)),
            " (MOSTLY_F16)"
        );
    }
}
