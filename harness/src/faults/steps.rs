//! A fault's documented fix steps, as a type: an enum whose serde names (kebab-case) are the names
//! scenario files give in `fix[].step`. The names are read from the type itself, so no fault lists
//! them a second time, and a name that is not a step is refused by serde, once, here.

use serde::de::{self, DeserializeOwned, Deserializer, IntoDeserializer, Visitor};
use serde::Serialize;

use super::api::FaultError;

/// A fault's fix steps: a unit-variant enum deriving `Serialize` and `Deserialize` (every such type
/// is one).
pub trait Steps: Copy + std::fmt::Debug + Send + Sync + Serialize + DeserializeOwned + 'static {
    /// The step's name in scenario files.
    fn name(self) -> &'static str {
        let written = match serde_json::to_value(self) {
            Ok(serde_json::Value::String(name)) => name,
            other => unreachable!("a fix step serialises as its name, not {other:?}"),
        };
        names::<Self>().iter().copied().find(|n| *n == written).expect("a step's name is one of its type's")
    }
}

impl<T: Copy + std::fmt::Debug + Send + Sync + Serialize + DeserializeOwned + 'static> Steps for T {}

/// The names of `S`'s steps, in declaration order (the document's order).
pub fn names<S: Steps>() -> &'static [&'static str] {
    /// A deserializer that only asks the enum for its variants' names.
    struct Names(Option<&'static [&'static str]>);
    #[derive(Debug)]
    struct Stop;
    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("not an enum")
        }
    }
    impl std::error::Error for Stop {}
    impl de::Error for Stop {
        fn custom<T: std::fmt::Display>(_: T) -> Self {
            Stop
        }
    }
    impl<'de> Deserializer<'de> for &mut Names {
        type Error = Stop;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_enum<V: Visitor<'de>>(self, _: &'static str, variants: &'static [&'static str], _: V) -> Result<V::Value, Stop> {
            self.0 = Some(variants);
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
            unit_struct newtype_struct seq tuple tuple_struct map struct identifier ignored_any
        }
    }
    let mut names = Names(None);
    let _ = S::deserialize(&mut names);
    names.0.unwrap_or_else(|| panic!("{} is not an enum of fix steps", std::any::type_name::<S>()))
}

/// Every step of `S`, in order.
pub fn all<S: Steps>() -> Vec<S> {
    names::<S>().iter().map(|n| parse::<S>("", n).expect("a step's own name parses")).collect()
}

/// The step named `name` of fault `fault`.
pub fn parse<S: Steps>(fault: &'static str, name: &str) -> Result<S, FaultError> {
    let de: de::value::StrDeserializer<'_, de::value::Error> = name.into_deserializer();
    S::deserialize(de).map_err(|_| FaultError::UnknownStep { fault, step: name.to_string(), offered: names::<S>() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
    #[serde(rename_all = "kebab-case")]
    enum Pause {
        UnpackNodePackage,
        ImportImage,
    }

    #[test]
    fn names_come_from_the_type_in_order() {
        assert_eq!(names::<Pause>(), ["unpack-node-package", "import-image"]);
        assert_eq!(all::<Pause>(), vec![Pause::UnpackNodePackage, Pause::ImportImage]);
        assert_eq!(Steps::name(Pause::ImportImage), "import-image");
        assert_eq!(parse::<Pause>("pause-missing", "import-image").unwrap(), Pause::ImportImage);
        let e = parse::<Pause>("pause-missing", "reboot-node").unwrap_err().to_string();
        assert_eq!(e, "fault pause-missing has no fix step \"reboot-node\"; it offers: unpack-node-package, import-image");
    }
}
