import { startService } from '../lib/service';
import { benchTenant } from '../scenarios/support/data-plane';
import { seedMemories } from '../scenarios/support/scale-seed';
async function main() {
  const url = 'postgres://postgres@127.0.0.1:5432/retr';
  const service = await startService({ databaseUrl: url });
  try {
    const tenant = await benchTenant(service.baseUrl);
    console.log(JSON.stringify(tenant));
    await seedMemories(url, tenant.organizationId, [tenant.personalityId], [
      { userId: 'retrieval-heavy', personality: 0, memories: 78000 },
      ...Array.from({ length: 100 }, (_, i) => ({ userId: `retrieval-other-${i}`, personality: 0, memories: 200 })),
    ], 20261128);
  } finally { await service.stop(); }
}
main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
