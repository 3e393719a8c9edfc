//! The channel table (in the default channel's database): one row per channel the server admin made, and
//! a copy of a channel's visibility.

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension};

use crate::media::ChannelId;
use crate::store::StoreError;

/// Who may watch a channel: the channel's own setting (`config::access`); the table keeps a copy, and
/// a channel made before the setting existed takes the table's value when it opens.
pub use crate::config::Visibility;

/// A channel as the table keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelRow {
    pub slug: ChannelId,
    pub name: String,
    pub visibility: Visibility,
    pub created_at: DateTime<Utc>,
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, String, String, String)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
}

fn parse((slug, name, visibility, created): (String, String, String, String)) -> Option<ChannelRow> {
    Some(ChannelRow {
        slug: ChannelId::new(&slug).ok()?,
        name,
        visibility: Visibility::parse(&visibility).unwrap_or(Visibility::Public),
        created_at: DateTime::parse_from_rfc3339(&created).map(|t| t.with_timezone(&Utc)).unwrap_or_default(),
    })
}

/// Every channel, in slug order (a row whose slug is not one any more is skipped and logged).
pub fn all(c: &mut Connection) -> Result<Vec<ChannelRow>, StoreError> {
    let mut stmt = c.prepare("SELECT slug, name, visibility, created_at FROM channels ORDER BY slug")?;
    let rows = stmt.query_map([], row)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let slug = r.0.clone();
            let parsed = parse(r);
            if parsed.is_none() {
                tracing::warn!(slug, "channels: a row with an invalid slug is skipped");
            }
            parsed
        })
        .collect())
}

/// One channel.
pub fn get(c: &mut Connection, slug: &ChannelId) -> Result<Option<ChannelRow>, StoreError> {
    let r = c
        .query_row("SELECT slug, name, visibility, created_at FROM channels WHERE slug = ?1", [slug.as_str()], row)
        .optional()?;
    Ok(r.and_then(parse))
}

/// Add a channel; false when the slug is taken.
pub fn insert(c: &mut Connection, ch: &ChannelRow) -> Result<bool, StoreError> {
    let n = c.execute(
        "INSERT OR IGNORE INTO channels (slug, name, visibility, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![ch.slug.as_str(), ch.name, ch.visibility.as_str(), ch.created_at.to_rfc3339()],
    )?;
    Ok(n == 1)
}

/// Change a channel's name and visibility; false when there is no such channel.
pub fn update(c: &mut Connection, ch: &ChannelRow) -> Result<bool, StoreError> {
    let n = c.execute(
        "UPDATE channels SET name = ?2, visibility = ?3 WHERE slug = ?1",
        params![ch.slug.as_str(), ch.name, ch.visibility.as_str()],
    )?;
    Ok(n == 1)
}

/// Remove a channel's row; false when there was none.
pub fn delete(c: &mut Connection, slug: &ChannelId) -> Result<bool, StoreError> {
    Ok(c.execute("DELETE FROM channels WHERE slug = ?1", [slug.as_str()])? == 1)
}
